"""LLM providers, sub-agents and the optimize loops (later issues build them here)."""
