"""Synthetic data: the procedural "petals" flowers of `corolla demo` and the tests.

    dataset: the petals written in the competition layout, generated once into a cache
    petals: draws the flowers: ten classes told apart by petal count, shape and colours
"""
