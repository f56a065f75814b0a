"""Where workers run and how the engine reaches them (never imports JAX): the backend seam (``backend``), the
worker protocol's client (``client``), the local pool by purpose (``pool``), ``ssh``/``ray``/local from settings
(``remote``, ``launcher``, ``ray_backend``, ``standin``), starting and ending processes (``spawn``, ``scratch``,
``devices``), model-written code's confinement and the secrets kept from children (``confinement``,
``secrets``), the device pool (``device``, ``device_pool``) and warm check workers (``warm_pool``, ``warm_keeper``).
"""
