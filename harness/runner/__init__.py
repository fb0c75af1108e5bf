"""The runner: cells, parallelism, expectations, seeds, replay."""
