# SPDX-License-Identifier: Apache-2.0
"""ctypes bindings of include/kiln.h: the library, its structs, Context.

Needs no torch.  The struct mirrors follow kiln.h member for member; their
struct_size is what kiln_problem_init / kiln_context_options_init write, so a
mirror that went stale against the library is refused by the library itself
(and, before that, by the size check in _init_struct).
"""
import ctypes
import os
import pathlib
import threading

__all__ = ["KilnError", "Context", "library_path", "bundle_paths_default"]

# --- kiln.h enums -----------------------------------------------------------
OK = 0
STATUS_NAMES = {
    0: "KILN_OK", 1: "KILN_ERROR_INVALID_ARGUMENT", 2: "KILN_ERROR_INVALID_SPEC",
    3: "KILN_ERROR_TEMPLATE", 4: "KILN_ERROR_COMPILE", 5: "KILN_ERROR_CACHE",
    6: "KILN_ERROR_DRIVER", 7: "KILN_ERROR_CUBLAS", 8: "KILN_ERROR_UNSUPPORTED",
    9: "KILN_ERROR_OUT_OF_MEMORY", 10: "KILN_ERROR_IO", 11: "KILN_ERROR_INTERNAL",
}
DTYPE_BF16, DTYPE_F16, DTYPE_F32, DTYPE_E4M3, DTYPE_E5M2 = 0, 1, 2, 3, 4
FP8_NONE, FP8_TENSOR, FP8_ROW, FP8_BLOCK = 0, 1, 2, 3
OP_FPROP, OP_DGRAD, OP_WGRAD = 0, 1, 2
SIZES_COUNTS, SIZES_OFFSETS = 0, 1
WGRAD_DENSE, WGRAD_DISCRETE = 0, 1
QUANT_ROWS, QUANT_ROWS_1X128, QUANT_WEIGHTS_128X128, QUANT_WEIGHTS_TENSOR = 0, 1, 2, 3
BACKEND_NAMES = {0: "none", 1: "generated", 2: "cublaslt"}
MAX_GROUPS = 65536


class KilnError(RuntimeError):
    """A failure reported by kiln; .status is the kiln_status name, the text
    is kiln_last_error's."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


# --- struct mirrors (kiln.h order and types) ------------------------------------
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class ContextOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int),
        ("cache_dir", ctypes.c_char_p),
        ("bundle_paths", ctypes.POINTER(ctypes.c_char_p)),
        ("tuning_tables", ctypes.POINTER(ctypes.c_char_p)),
        ("allowed_backends", ctypes.c_uint),
        ("log", _LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("cache_max_bytes", ctypes.c_uint64),
        ("checked", ctypes.c_int),
    ]


class Epilogue(ctypes.Structure):
    _fields_ = [
        ("d_bias", ctypes.c_void_p),
        ("ld_bias", ctypes.c_int64),
        ("d_row_scale", ctypes.c_void_p),
        ("scale_bias", ctypes.c_int),
        ("alpha", ctypes.c_float),
        ("d_alpha", ctypes.c_void_p),
        ("beta", ctypes.c_float),
        ("d_c", ctypes.c_void_p),
        ("ldc", ctypes.c_int64),
    ]


class Fp8(ctypes.Structure):
    _fields_ = [
        ("recipe", ctypes.c_int),
        ("d_scale_a", ctypes.c_void_p),
        ("d_scale_b", ctypes.c_void_p),
        ("ld_scale_a", ctypes.c_int64),
        ("promote", ctypes.c_int),
        ("d_bt", ctypes.c_void_p),
    ]


class Problem(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("op", ctypes.c_int),
        ("a_type", ctypes.c_int),
        ("b_type", ctypes.c_int),
        ("out_type", ctypes.c_int),
        ("groups", ctypes.c_int32),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("capacity", ctypes.c_int64),
        ("d_sizes", ctypes.c_void_p),
        ("sizes_kind", ctypes.c_int),
        ("host_sizes", ctypes.c_void_p),
        ("d_a", ctypes.c_void_p),
        ("lda", ctypes.c_int64),
        ("d_b", ctypes.c_void_p),
        ("ldb", ctypes.c_int64),
        ("d_b_ptrs", ctypes.c_void_p),
        ("d_out", ctypes.c_void_p),
        ("ldd", ctypes.c_int64),
        ("d_out_ptrs", ctypes.c_void_p),
        ("wgrad_output", ctypes.c_int),
        ("accumulate", ctypes.c_int),
        ("d_dbias", ctypes.c_void_p),
        ("d_dbias_ptrs", ctypes.c_void_p),
        ("ld_dbias", ctypes.c_int64),
        ("dbias_type", ctypes.c_int),
        ("epilogue", Epilogue),
        ("fp8", Fp8),
        ("d_overflow", ctypes.c_void_p),
    ]


class Quant(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("in_type", ctypes.c_int),
        ("out_type", ctypes.c_int),
        ("groups", ctypes.c_int32),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("d_sizes", ctypes.c_void_p),
        ("sizes_kind", ctypes.c_int),
        ("d_in", ctypes.c_void_p),
        ("ld_in", ctypes.c_int64),
        ("d_out", ctypes.c_void_p),
        ("ld_out", ctypes.c_int64),
        ("d_scale", ctypes.c_void_p),
        ("ld_scale", ctypes.c_int64),
        ("d_out_t", ctypes.c_void_p),
        ("d_scale_t", ctypes.c_void_p),
        ("d_amax", ctypes.c_void_p),
    ]


class CallReport(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("kernel", ctypes.c_char * 128),
                ("reason", ctypes.c_char * 256)]


class ContextStats(ctypes.Structure):
    _fields_ = [("nvrtc_compiles", ctypes.c_uint64), ("cache_hits", ctypes.c_uint64),
                ("bundle_hits", ctypes.c_uint64), ("launches", ctypes.c_uint64)]


# --- finding the library ------------------------------------------------------
_PKG = pathlib.Path(__file__).resolve().parent


def _source_build_dir():
    """The build folder of a source checkout (python/kiln is two below the
    root): $KILN_BUILD_DIR, else <root>/build."""
    env = os.environ.get("KILN_BUILD_DIR")
    return pathlib.Path(env) if env else _PKG.parent.parent / "build"


def _candidates():
    env = os.environ.get("KILN_LIBRARY")
    if env:
        # Named explicitly: that file or nothing.
        return [("$KILN_LIBRARY", pathlib.Path(env))]
    out = [("the package", _PKG / "lib" / name) for name in ("libkiln.so.0", "libkiln.so")]
    out.append(("the source checkout's build folder", _source_build_dir() / "runtime" / "libkiln.so"))
    return out


def _load():
    tried = []
    for where, path in _candidates():
        if path.is_file():
            try:
                return ctypes.CDLL(str(path)), path
            except OSError as e:
                raise ImportError(f"kiln: cannot load {path} (from {where}): {e}") from e
        tried.append(str(path))
    raise ImportError(
        "kiln: libkiln.so not found; looked for " + ", ".join(tried) +
        ". Install with `pip install ./python`, or build the library "
        "(cmake --build build --target kiln_shared) and set KILN_BUILD_DIR or KILN_LIBRARY")


_lib, library_path = _load()


def _sig(name, res, *args):
    f = getattr(_lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_P = ctypes.c_void_p
kiln_version = _sig("kiln_version", ctypes.c_char_p)
kiln_status_name = _sig("kiln_status_name", ctypes.c_char_p, ctypes.c_int)
kiln_context_options_init = _sig("kiln_context_options_init", None, _P)
kiln_context_create = _sig("kiln_context_create", ctypes.c_int, _P, ctypes.POINTER(_P))
kiln_context_destroy = _sig("kiln_context_destroy", None, _P)
kiln_last_error = _sig("kiln_last_error", ctypes.c_char_p, _P)
kiln_problem_init = _sig("kiln_problem_init", None, _P, ctypes.c_int)
# kiln_gemm takes the problem as a plain address: kiln._torch passes a cached
# struct's address (an int) on its per-call path, Context.gemm a byref.
kiln_gemm = _sig("kiln_gemm", ctypes.c_int, _P, _P, _P)
kiln_prepare = _sig("kiln_prepare", ctypes.c_int, _P, ctypes.POINTER(Problem))
kiln_quant_init = _sig("kiln_quant_init", None, _P, ctypes.c_int)
kiln_quantize = _sig("kiln_quantize", ctypes.c_int, _P, ctypes.POINTER(Quant), _P)
kiln_last_call = _sig("kiln_last_call", ctypes.c_int, _P, ctypes.POINTER(CallReport))
kiln_context_stats_get = _sig("kiln_context_stats_get", ctypes.c_int, _P,
                              ctypes.POINTER(ContextStats))

version = kiln_version().decode()


def _init_struct(cls, init, *args):
    """Runs kiln's *_init into a buffer larger than the mirror (so a newer,
    larger C struct cannot write past it), then checks the size it wrote."""
    buf = ctypes.create_string_buffer(ctypes.sizeof(cls) + 1024)
    init(ctypes.cast(buf, _P), *args)
    size = ctypes.c_size_t.from_buffer(buf).value
    if size != ctypes.sizeof(cls):
        raise KilnError(
            f"libkiln's {cls.__name__} is {size} bytes but kiln's Python mirror is "
            f"{ctypes.sizeof(cls)}: the package and {library_path} are from different "
            "kiln versions", "KILN_ERROR_INVALID_ARGUMENT")
    return cls.from_buffer_copy(buf.raw[:size])


_templates = {}


def _from_template(cls, init, kind):
    """A struct as kiln's *_init fills it for kind, copied from a checked
    template: the init and its size check run once per (struct, kind)."""
    t = _templates.get((cls, kind))
    if t is None:
        t = _templates[(cls, kind)] = _init_struct(cls, init, kind)
    return cls.from_buffer_copy(t)


def new_problem(op):
    """A kiln_problem as kiln_problem_init fills it."""
    return _from_template(Problem, kiln_problem_init, op)


def new_quant(kind):
    """A kiln_quant as kiln_quant_init fills it."""
    return _from_template(Quant, kiln_quant_init, kind)


def bundle_paths_default():
    """Bundles a source checkout's library would not find by itself: the
    build folder's default bundle (an installed package finds its own, beside
    the library)."""
    if library_path.parent.parent == _PKG:
        return []
    b = library_path.parent.parent / "kiln-sm_90a.kbundle"
    return [str(b)] if b.is_file() else []


def _c_strings(items):
    if items is None:
        return None
    arr = (ctypes.c_char_p * (len(items) + 1))()
    for i, s in enumerate(items):
        arr[i] = os.fsencode(s)
    arr[len(items)] = None
    return arr


class Context:
    """A kiln_context on one CUDA device.

    Context(device=0, bundle_paths=None, cache_dir=None, tuning_tables=None,
    allowed_backends=0) raises KilnError with kiln's message when the context
    cannot be made (no driver, no such device).  Calls on one Context may come
    from several threads (kiln serialises them)."""

    def __init__(self, device=0, bundle_paths=None, cache_dir=None, tuning_tables=None,
                 allowed_backends=0):
        opts = _init_struct(ContextOptions, kiln_context_options_init)
        opts.device = int(device)
        if bundle_paths is None:
            bundle_paths = bundle_paths_default() or None
        # Kept alive as long as the options are read (kiln copies them).
        self._keep = [_c_strings(bundle_paths), _c_strings(tuning_tables),
                      os.fsencode(cache_dir) if cache_dir else None]
        if self._keep[0] is not None:
            opts.bundle_paths = ctypes.cast(self._keep[0], ctypes.POINTER(ctypes.c_char_p))
        if self._keep[1] is not None:
            opts.tuning_tables = ctypes.cast(self._keep[1], ctypes.POINTER(ctypes.c_char_p))
        opts.cache_dir = self._keep[2]
        opts.allowed_backends = int(allowed_backends)
        self.device = int(device)
        self._ctx = None
        h = _P()
        st = kiln_context_create(ctypes.byref(opts), ctypes.byref(h))
        if st != OK:
            msg = (kiln_last_error(h) or b"").decode(errors="replace")
            if h.value:
                kiln_context_destroy(h)
            raise KilnError(f"kiln.Context(device={device}): {msg}", STATUS_NAMES.get(st, st))
        self._ctx = h
        self._lock = threading.Lock()

    def _check(self, st, what):
        if st != OK:
            msg = (kiln_last_error(self._ctx) or b"").decode(errors="replace")
            raise KilnError(f"{what}: {msg}", STATUS_NAMES.get(st, st))

    def gemm(self, problem, stream=0):
        """kiln_gemm on `stream` (a CUstream handle as an int)."""
        self._check(kiln_gemm(self._ctx, ctypes.byref(problem), _P(stream or None)), "kiln_gemm")

    def prepare(self, problem):
        self._check(kiln_prepare(self._ctx, ctypes.byref(problem)), "kiln_prepare")

    def quantize(self, quant, stream=0):
        """kiln_quantize on `stream` (a CUstream handle as an int)."""
        self._check(kiln_quantize(self._ctx, ctypes.byref(quant), _P(stream or None)),
                    "kiln_quantize")

    def last_call(self):
        r = CallReport()
        self._check(kiln_last_call(self._ctx, ctypes.byref(r)), "kiln_last_call")
        return {"backend": BACKEND_NAMES.get(r.backend, r.backend),
                "kernel": r.kernel.decode(errors="replace"),
                "reason": r.reason.decode(errors="replace")}

    def stats(self):
        s = ContextStats()
        self._check(kiln_context_stats_get(self._ctx, ctypes.byref(s)), "kiln_context_stats_get")
        return {f: getattr(s, f) for f, _ in ContextStats._fields_}

    def close(self):
        if self._ctx is not None and kiln_context_destroy is not None:
            kiln_context_destroy(self._ctx)
            self._ctx = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
