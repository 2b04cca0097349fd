/* SPDX-License-Identifier: Apache-2.0 */
/* validate.h — the old name of problem.h, for tests/support/gpu_util.h
 * until it includes problem.h. */
#ifndef KILN_VALIDATE_H
#define KILN_VALIDATE_H
#include "problem.h"
#endif
