"""llama-cpp-python's OpenAI-compatible server, with every prompt evaluated from the start and
token counts in streams.

Started by scripts/llm-server.sh with the server's own command-line arguments. llama-cpp-python
keeps the key/value cache of the previous prompt and evaluates only what follows the longest
common prefix. The rest of the prompt is then evaluated in other batch sizes than a whole
evaluation would use, the logits differ in their last bits, and the greedy reply of a 135M model
flips on them: the same request answered differently depending on which request came before.
Evaluating each prompt whole makes a reply a function of its request alone, which the tests
that assert on the real model's replies rely on.

llama-cpp-python 0.3 sends no `usage` in a streamed completion (OpenAI does with
`stream_options.include_usage`, llama.cpp's own server in its last chunk). A streamed chat
completion here ends, like OpenAI's, with a chunk of no choices holding the usage: the prompt's
tokens and the tokens generated, counted as the non-streamed completion counts them (an
end-of-generation token is not one), so both report the same numbers for the same request.
"""

import llama_cpp
from llama_cpp.server.__main__ import main

_generate = llama_cpp.Llama.generate
_create_chat_completion = llama_cpp.Llama.create_chat_completion


def _generate_from_the_start(self, tokens, *args, **kwargs):
    # n_tokens = 0: no prefix of the cache is kept; eval() clears the cache from position 0.
    self.reset()
    usage = self._stream_usage = {"prompt_tokens": len(tokens), "completion_tokens": 0}
    for token in _generate(self, tokens, *args, **kwargs):
        if not llama_cpp.llama_vocab_is_eog(self._model.vocab, token):
            usage["completion_tokens"] += 1
        yield token


def _with_usage(self, chunks):
    self._stream_usage = None
    last = None
    for chunk in chunks:
        last = chunk
        yield chunk
    usage = self._stream_usage
    if last is not None and usage is not None:
        usage = dict(usage, total_tokens=usage["prompt_tokens"] + usage["completion_tokens"])
        yield {"id": last["id"], "object": "chat.completion.chunk", "created": last["created"],
               "model": last["model"], "choices": [], "usage": usage}


def _create_chat_completion_with_usage(self, *args, **kwargs):
    result = _create_chat_completion(self, *args, **kwargs)
    return _with_usage(self, result) if kwargs.get("stream") else result


llama_cpp.Llama.generate = _generate_from_the_start
llama_cpp.Llama.create_chat_completion = _create_chat_completion_with_usage

if __name__ == "__main__":
    main()
