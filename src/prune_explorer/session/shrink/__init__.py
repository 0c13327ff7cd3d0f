"""Shrink: physically remove the channels that pruning made dead, with Torch-Pruning's DepGraph
(:mod:`.depgraph`), describe the shrunk architecture as JSON so it loads without pickle
(:mod:`.description`), and measure what it saved (:mod:`.measure`).
"""
