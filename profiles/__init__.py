"""Ready-made workload profiles and data catalogs (models, GPUs), shipped as YAML."""
