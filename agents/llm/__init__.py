"""Model calls: providers behind one interface (``providers``; ``providers_gemini``, ``providers_openai``,
``providers_scripted``), the one calling path with its budget and redaction (``model_client``), keys
(``keys``), rate limits (``rate_limit``) and the recording of every call (``recording``).
"""
