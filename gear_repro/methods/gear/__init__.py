"""GEAR (seed 000): graph expansion NaiveGE / SyncGE (§4) with the diverse triple beam search (Alg. 1) and its
path scorers, and the multi-step agent with gist memory, reasoner, rewriter and passageLink (§5)."""
