"""Bridges to the engines that run customlayers at scale. Each needs its optional extra:

    ray          Ray Data batch inference (`CustomLayersPredictor` for `Dataset.map_batches`)
                 and the Ray Serve example; `pip install customlayers[ray]`

The floors below (runtime, graph) never import this package; it uses their public API only.

May import: the public API (customlayers.api) and the floors below; Ray only here.
"""
