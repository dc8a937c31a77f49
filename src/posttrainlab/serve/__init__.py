"""An OpenAI-compatible server for any ``SamplingBackend`` (``posttrain serve``).

``app.create_app(backend, model_name, api_key=None, ...)`` puts ``/v1/models``, ``/v1/chat/completions``
and ``/v1/completions`` in front of any object with the ``generate`` method of
``posttrainlab.generation.SamplingBackend``: a local Hugging Face model (``TransformersBackend``), a
program judge (``serve.program_judge``), or a test double. ``requests`` says which request fields are
implemented and refuses the rest (400, never dropped); ``batcher.Batcher`` makes concurrent requests
share one backend call, decoding the transformers backend step by step (``decode``); ``streaming`` sends
``stream: true`` answers as server-sent events, tokens as they are generated; ``disconnect`` drops a request
whose client has gone; ``logprobs`` scores tokens (``logprobs``, ``top_logprobs``, ``echo``); ``tokens``
encodes prompts; ``server`` binds and runs the app. See ``docs/judge.md`` ("Serving").

This package's ``__init__`` imports nothing: FastAPI and uvicorn are loaded only by ``serve.app`` and the modules it
uses, so a module beside them (the program judge) can be imported without them.
"""
