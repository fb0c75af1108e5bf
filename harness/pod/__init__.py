"""Pod mode: the catalog's scenarios on real TPU VMs, reached over SSH (seed 002).

The controller (this machine) connects to every worker, syncs the user's code
to one commit, pushes each cell, starts one launcher per host and collects what
every rank recorded; the cells are judged by the same checkers into the same
report, marked ``mode: pod``. Modules, one job each:

- ``workers``: who the workers are (a hosts file, a Cloud TPU, a local pod);
- ``local``: the local pod, N real SSH servers on 127.0.0.1 with a disk each;
- ``cloud``: provisioning through ``gcloud`` (queued resources, ttl, cleanup);
- ``session``: one SSH client per worker: commands, streamed logs, SFTP;
- ``sync``: the user's code at one commit, and this harness, on every worker;
- ``host``: the launcher that runs on a worker (never imported by the controller);
- ``rank``: the rank-side fault engine and history recorder around the real torch_xla;
- ``controller``: a pod run, cell by cell, into the runner's cells.
"""
