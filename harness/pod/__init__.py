"""Pod mode: the catalog's scenarios on real TPU VMs, reached over SSH (seed 002, docs/seeds.md).

The controller (this machine) connects to every worker, syncs the user's code
to one commit, pushes each cell, starts one launcher per host and collects what
every rank recorded; the cells are judged by the same checkers into the same
report, marked ``mode: pod``. Modules, one job each:

- ``workers``: who the workers are (a hosts file; ``cloud``: a Cloud TPU);
- ``local``: the local pod, N real SSH servers on 127.0.0.1 with a disk each;
- ``cloud``: gcloud: describe a TPU, provision it (queued resources, ttl), release, sweep;
- ``session``: one SSH client per worker: commands, streamed logs, SFTP;
- ``sync``: the same harness and the user's code at one commit on every worker;
- ``spec``: what the controller hands a worker for one cell;
- ``host``: the launcher that runs on a worker (the controller reads only its constants);
- ``rank``, ``recorder``: the rank side: fault engine, filesystem view, history;
- ``fabric``: the local pod's interconnect for the shim's collectives;
- ``controller``: one cell on the pod, collected into a world's result;
- ``matrix``: which scenarios run on a pod, and the catalog's cells there;
- ``cli``: ``harness pod``.
"""
