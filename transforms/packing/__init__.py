"""Sequence packing (`--pack_sequences`): several whole instances to a row.

`histogram` decides which lengths share a row from the length histogram
alone; `plan` turns that into rows of a shard's actual instances, in a
deterministic order, and bounds a row's masked-LM predictions. The rows are
written by transforms.rows.
"""
