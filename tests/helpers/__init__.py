"""Test doubles shared by the suite: a scripted LLM, a model-free embedder, run helpers."""
