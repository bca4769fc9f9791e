"""vLLM start-up logs, read: their records, the lines each release prints, the settings they state, and
the memory budget of the run they show."""
