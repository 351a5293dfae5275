# configs/endpoints.py: the older Python form of endpoints.toml, read as data (never run). primekit reads it
# when there is no configs/endpoints.toml, or with `-e configs/endpoints.py`. "key" is the NAME of the
# environment variable holding the API key; "local" (or an unset variable, for a server on this machine)
# sends a placeholder key, as verifiers does, for servers started without one.
ENDPOINTS = {
    # `prime serve --port 8000`: the embedded model over HTTP
    "smollm2-135m-http": {
        "model": "local/smollm2-135m",
        "url": "http://127.0.0.1:8000/v1",
        "key": "local",
    },
    # a vLLM server you started (`vllm serve Qwen/Qwen3.5-4B --port 8001`)
    "qwen3.5-4b": {
        "model": "Qwen/Qwen3.5-4B",
        "url": "http://localhost:8001/v1",
        "key": "local",
    },
    # a hosted OpenAI-compatible API; export OPENAI_API_KEY first
    "gpt-4.1-mini": {
        "model": "gpt-4.1-mini",
        "url": "https://api.openai.com/v1",
        "key": "OPENAI_API_KEY",
        "type": "openai_chat_completions",
    },
}
