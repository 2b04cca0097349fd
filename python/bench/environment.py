# SPDX-License-Identifier: Apache-2.0
"""Environment variables held for one moment: kiln reads its settings
(KILN_KERNEL, KILN_SPLIT, KILN_LIBRARY, ...) when a context is made or the
library is loaded, so benchmarks that compare settings in one process set
them around that moment only, and leave the environment as they found it.
No torch here, so that it is tested in CI (tests/environment_test.py)."""
import contextlib
import os


def _put(name, value):
    """NAME set to value, or unset for None."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def environment(values):
    """Each NAME of values set to its value (None: unset) for the with
    block; what each was before is restored after it, exception or not."""
    old = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _put(name, value)
        yield
    finally:
        for name, value in old.items():
            _put(name, value)
