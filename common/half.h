/* SPDX-License-Identifier: Apache-2.0 */
/* half.h — bf16 and fp16 to and from float, on the host.
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

#endif
