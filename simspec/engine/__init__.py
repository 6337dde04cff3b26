"""Real models and the tree speculative-decoding engine (torch, transformers): loading targets
and drafters, the draft tree, the engine's cycle, the lossless check."""
