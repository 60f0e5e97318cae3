"""The pipeline above the methods: run resources, method wiring from the config, the runner."""
