"""llama-cpp-python's OpenAI-compatible server, with every prompt evaluated from the start.

Started by scripts/llm-server.sh with the server's own command-line arguments. llama-cpp-python
keeps the key/value cache of the previous prompt and evaluates only what follows the longest
common prefix. The rest of the prompt is then evaluated in other batch sizes than a whole
evaluation would use, the logits differ in their last bits, and the greedy reply of a 135M model
flips on them: the same request answered differently depending on which request came before.
Evaluating each prompt whole makes a reply a function of its request alone, which the tests
that assert on the real model's replies rely on.
"""

import llama_cpp
from llama_cpp.server.__main__ import main

_generate = llama_cpp.Llama.generate


def _generate_from_the_start(self, tokens, *args, **kwargs):
    # n_tokens = 0: no prefix of the cache is kept; eval() clears the cache from position 0.
    self.reset()
    return _generate(self, tokens, *args, **kwargs)


llama_cpp.Llama.generate = _generate_from_the_start

if __name__ == "__main__":
    main()
