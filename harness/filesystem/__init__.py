"""The filesystem: the sandbox, the mount table, consistency, interception."""
