"""Primitives shared by several methods: reciprocal rank fusion, the triple graph (entity adjacency over T,
tripleLink's index docs) and the K.2 reader of triples."""
