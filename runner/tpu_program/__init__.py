"""The TPU program of an exported module, run on the CPU by the judge (worker side).

``hlo_exec`` runs the XLA ops of a module's TPU branch (the program a TPU would run) through the judge's
own table of ``jax.lax`` translations, handing each Mosaic kernel (``tpu_custom_call``) to the judge's
interpreter of Mosaic kernels (``mosaic_*``); an op it cannot run is reported, never passed.
"""
