"""The world: topology, fork server, rank processes, coordinator and watchdog."""
