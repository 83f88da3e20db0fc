"""`migrate.tf1_builder`: the public name of `migrate.tf1.builder` (docs/reference/internals.md, "The TF1 side").

An alias, not a copy: importing it gives the very module `migrate.tf1.builder`, so attributes,
patches and `from migrate.tf1_builder import write_model_dir` all reach the same objects.
"""

import sys

from migrate.tf1 import builder

sys.modules[__name__] = builder
