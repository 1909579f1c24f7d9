"""Auditing data (`corolla check-data`): what a data set holds, before any training on it.

    duplicates: exact and near-duplicate images, by fingerprints of their pixels
    findings: a survey's findings as the terminal shows them (the table, train's one line)
    survey: one streaming pass over any data: duplicates, classes, sizes, unreadable images
"""
