"""HippoRAG v1 as GEAR re-ran it (OSU-NLP-Group/HippoRAG, branch legacy): phrase graph with synonym edges,
query NER, node linking and Personalized PageRank; the single-step method over it."""
