/* SPDX-License-Identifier: Apache-2.0 */
/* half.h — bf16, fp16 and the fp8 types to and from float, on the host.
 *
 * Narrowing rounds to nearest, ties to even, as the GPU's cvt.rn does;
 * overflow gives infinity, NaN stays NaN (quiet, sign kept).  Widening is
 * exact.  The one conversion of the tree: tests, benchmark and tuner all
 * use it, so a value means the same thing everywhere. */
#ifndef KILN_HALF_H
#define KILN_HALF_H

#include <stdint.h>

uint16_t kiln_f32_to_bf16(float f);
float kiln_bf16_to_f32(uint16_t h);
uint16_t kiln_f32_to_f16(float f);
float kiln_f16_to_f32(uint16_t h);

/* fp8 (OCP FP8: e4m3 with no infinities, largest 448, NaN S.1111.111;
 * e5m2 with IEEE infinities and NaNs, largest 57344).  Narrowing rounds to
 * nearest even and saturates, as cvt.rn.satfinite does on the GPU: past the
 * largest finite value (infinity too) gives ±largest, NaN gives NaN. */
uint8_t kiln_f32_to_e4m3(float f);
float kiln_e4m3_to_f32(uint8_t h);
uint8_t kiln_f32_to_e5m2(float f);
float kiln_e5m2_to_f32(uint8_t h);

#endif
