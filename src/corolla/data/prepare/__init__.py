"""Preparing data: image folders and CSVs turned into the competition layout, by `corolla
convert` or once into a cache when training reads a folder or a CSV.

    cache: the conversion cache: a source converted once, reused while its files are unchanged
    sharding: a source -> sharded TFRecords in the competition layout, written all or nothing
    image_files: images read from files: decoded and fitted as a conversion writes them
    settings: what a conversion is asked for (Settings) and what marks its output (convert.json)
    sources: where images come from: image folders and CSVs listed as labelled items
    splits: the splits a conversion makes, copies kept in one split, in a reproducible order
    summary: what a conversion did: its summary, its convert.json and its closing lines
"""
