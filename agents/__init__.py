"""LLM agents: providers behind one interface (providers.py), the verified fixer (fixer.py).

Providers: gemini (google-genai), openai (any OpenAI-compatible endpoint), scripted and
replay:<run-id>; their SDKs are the optional ``agents`` extra. Model-written code runs only in
check workers, like the user's own code.
"""
