/* SPDX-License-Identifier: Apache-2.0 */
/* test_json.c — the one JSON writer: commas, nesting, escapes, and no NaN or
 * Inf ever written (null instead). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "json.h"

static void test_document(void **state)
{
    (void)state;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_json j;
    kiln_json_init(&j, &sb, 0);
    kiln_json_object(&j);
    kiln_json_kstring(&j, "name", "a\"b\\c\nd\x1b");
    kiln_json_knumber(&j, "ms", 1.5);
    kiln_json_knumber(&j, "nan", NAN);
    kiln_json_knumber(&j, "inf", INFINITY);
    kiln_json_knumber(&j, "-inf", -INFINITY);
    kiln_json_key(&j, "list");
    kiln_json_array(&j);
    kiln_json_int(&j, 3);
    kiln_json_bool(&j, 1);
    kiln_json_null(&j);
    kiln_json_object(&j);
    kiln_json_end(&j);
    kiln_json_end(&j);
    kiln_json_end(&j);
    assert_false(j.bad);
    assert_string_equal(sb.data, "{\"name\": \"a\\\"b\\\\c\\nd\\u001b\", \"ms\": 1.5, "
                                 "\"nan\": null, \"inf\": null, \"-inf\": null, "
                                 "\"list\": [3, true, null, {}]}\n");
    kiln_strbuf_free(&sb);
}

static void test_folded_lines(void **state)
{
    (void)state;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_json j;
    kiln_json_init(&j, &sb, 2);
    kiln_json_object(&j);
    kiln_json_key(&j, "k");
    kiln_json_array(&j);
    kiln_json_object(&j);
    kiln_json_kint(&j, "a", 1);
    kiln_json_kint(&j, "b", 2);
    kiln_json_end(&j);
    kiln_json_end(&j);
    kiln_json_end(&j);
    assert_false(j.bad);
    assert_string_equal(sb.data, "{\n  \"k\": [\n    {\"a\": 1, \"b\": 2}\n  ]\n}\n");
    kiln_strbuf_free(&sb);
}

static void test_misuse_is_flagged(void **state)
{
    (void)state;
    kiln_strbuf sb;
    kiln_strbuf_init(&sb);
    kiln_json j;
    kiln_json_init(&j, &sb, 0);
    kiln_json_array(&j);
    kiln_json_key(&j, "not in an object");
    assert_true(j.bad);
    kiln_strbuf_free(&sb);
}

KILN_TEST_MAIN(
    cmocka_unit_test(test_document),
    cmocka_unit_test(test_folded_lines),
    cmocka_unit_test(test_misuse_is_flagged))
