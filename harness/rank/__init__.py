"""The rank side of a world: what runs in a unit process (a rank, or a host's launcher in
exec mode), in the fork server that forks them and in each world's leader, and what both
sides share (``spec``, the picklable description of a world; ``wire``, the framing;
``values``, a rank's return value as plain data).

``bootstrap`` is the one way into a rank, for the simulator and for a pod's worker alike:
the environment of a TPU VM, the world's clock, the fault engine, the filesystem view and
the seeded generators, then the target and its result. Nothing here imports the harness
side (``harness.world``): a rank never runs the coordinator, the server or the checkers.
"""
