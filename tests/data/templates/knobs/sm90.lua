-- Family sm90 for tests/unit/test_kernel.c: dumps its knobs.
return include("dump")(...)
