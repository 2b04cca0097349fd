/* Compiles generated sources with NVRTC for sm_90a (no GPU needed) and
 * prints the compile time and ptxas' resource lines.
 * cc -O2 nvrtc_check.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvrtc */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 1; }
        fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
        char *src = malloc(n + 1); fread(src, 1, n, f); src[n] = 0; fclose(f);
        struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
        nvrtcProgram p; nvrtcCreateProgram(&p, src, argv[i], 0, 0, 0);
        const char *opts[] = {"-arch=sm_90a", "-std=c++17", "--ptxas-options=-v"};
        nvrtcResult r = nvrtcCompileProgram(p, 3, opts);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        size_t ln; nvrtcGetProgramLogSize(p, &ln); char *log = malloc(ln + 1); nvrtcGetProgramLog(p, log);
        printf("%s: %s %.0f ms\n%s\n", argv[i], nvrtcGetErrorString(r),
               (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, log);
        nvrtcDestroyProgram(&p); free(src); free(log);
        if (r != NVRTC_SUCCESS) return 1;
    }
    return 0;
}
