#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds DeepGEMM's Python extension in place, for deepgemm_peer.py.

DeepGEMM is not part of kiln and nothing of it is in this repository: DIR
is a checkout of github.com/deepseek-ai/DeepGEMM with its third-party/cutlass
and third-party/fmt submodules (their include folders are all it needs) and
deep_gemm/include/{cute,cutlass} linked to cutlass's, as its develop.sh
links them.  Its own setup.py needs the `wheel` package; this builds the
same extension (csrc/python_api.cpp, host code only: the kernels are
compiled at their first call) with torch's build_ext:

    CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared" \\
        python3 python/bench/deepgemm_build.py DIR build_ext --inplace
    PYTHONPATH=DIR python3 python/bench/deepgemm_peer.py ...

Name the system compiler as above where Python's sysconfig names another:
on the H200 machines its /opt/gcc/bin/g++ links libstdc++ statically, and
the extension then crashed in std::locale (inside std::regex and ostream
inserts) at its first kernel compile (docs/fp8.md, fifty-third session).
"""
import os
import sys

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

if len(sys.argv) < 2:
    sys.exit("usage: deepgemm_build.py DEEPGEMM_DIR build_ext --inplace")
ROOT = os.path.abspath(sys.argv.pop(1))
os.chdir(ROOT)   # setup() works relative to the package
INCLUDES = ["deep_gemm/include", "third-party/cutlass/include", "third-party/fmt/include"]
setup(name="deep_gemm", ext_modules=[CUDAExtension(
    name="deep_gemm._C", sources=["csrc/python_api.cpp"],
    # absolute: ninja compiles from the build folder
    include_dirs=[f"{CUDA_HOME}/include", f"{CUDA_HOME}/include/cccl"] +
                 [os.path.join(ROOT, d) for d in INCLUDES],
    libraries=["cudart", "nvrtc"], library_dirs=[f"{CUDA_HOME}/lib64"],
    extra_compile_args=["-std=c++17", "-O3", "-fPIC", "-Wno-psabi", "-Wno-deprecated-declarations",
                        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"])],
    cmdclass={"build_ext": BuildExtension})
