"""kvtool: plan, serve, benchmark and diagnose LLM serving limits."""

__version__ = "0.1.0"
