"""The Hypothesis profile of the hostile-input tests: few examples, reproducible.

`derandomize` makes every run try the same inputs (a CI failure reproduces locally,
and a pass is not luck), `database=None` and a storage directory under the temporary
directory keep Hypothesis from writing `.hypothesis/` (its example database and its
cache of the constants in our sources) into the repository, and no deadline: the
machine may be shared, timing is not the property. HYPOTHESIS_PROFILE=hostile-long
runs ten times more examples, by hand.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "simdra-hypothesis")

settings.register_profile(
    "hostile",
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "hostile-long",
    parent=settings.get_profile("hostile"),
    max_examples=1200,
    derandomize=False,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "hostile"))
