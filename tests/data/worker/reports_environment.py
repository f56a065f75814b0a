"""Reports the environment kernel code sees, as a module constant the import op returns."""

import os

ENVIRONMENT = dict(os.environ)
