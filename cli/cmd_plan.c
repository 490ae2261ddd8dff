/* brigade plan MODEL [options]: cuts a model into stages with the planner
 * (stages/planner.h) or a given --split, and prints each stage's layers,
 * device, predicted time and memory against capacity, the predicted step
 * time and the bubble. Refuses (exit 2) what does not fit, saying which
 * stage overflows by how much and which change would make it fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "placement.h"
#include "planning.h"
#include "topology.h"

static const char help[] =
    "usage: brigade plan MODEL [options]\n"
    "\n"
    "Plans how MODEL (a model spec file) is cut into stages, without training:\n"
    "the layers each stage holds, its device, its predicted compute and transfer\n"
    "time per step, its memory against the device's capacity, and the predicted\n"
    "step time and bubble. Without --split, the planner finds among all splits\n"
    "into contiguous stages, with every stage fitting its device, two: the one\n"
    "whose slowest stage (compute plus its own sends) is fastest, and the one\n"
    "of the shortest predicted step (M x the slowest stage plus the others'\n"
    "fill and drain: at few micro-batches a slower stage can pay for less\n"
    "copying), both exact, not greedy. It simulates both op by op ('brigade\n"
    "simulate') and keeps the faster; --microbatches auto and --schedule auto\n"
    "go by the same simulated step. With --chunks V > 1 it also searches the\n"
    "splits whose devices hold their V stages together, and a model of at most\n"
    "512 splits (up to 4,096 where their simulations are short: 2,600 into 4\n"
    "stages up to M = 25) has every split simulated, the fastest that fits kept\n"
    "(docs/planner.md).\n"
    "\n"
    "The figures come from an analytic cost model. Forward time is the layer's\n"
    "FLOPs over the device's speed plus a small cost per op, but at least the\n"
    "time to read its weights (12 GB/s on a CPU core: small micro-batches of\n"
    "a large dense layer are bound by that, not by FLOPs); backward is twice\n"
    "that for layers with weights (dX and dW) and once for the others (the\n"
    "model's first layer has no dX: nothing comes before it), but\n"
    "for tanh, sigmoid, gelu, layernorm, dropout, relu, the pools and the loss,\n"
    "priced by their time measured on a CPU core (a tanh value's forward as\n"
    "14.5 ns of it, not 1 FLOP; a max-pool's window value as 0.45 ns:\n"
    "docs/planner.md), on a GPU tanh, sigmoid, gelu, layernorm and dropout by\n"
    "the bytes they stream and the others by their FLOPs;\n"
    "--recompute adds a forward. A CPU device is one core at 80 GFLOP/s (what\n"
    "brigade measures on the origin CNN); activations cross between CPU\n"
    "devices at 5 GB/s. Memory is predicted exactly as the stages allocate it:\n"
    "parameters, gradients, optimizer state (adam 2x the parameters, sgd none,\n"
    "sgd with momentum 1x), the stash of every micro-batch a stage holds at\n"
    "once (its schedule decides how many: gpipe all M, 1f1b min(S - s, M) for\n"
    "stage s of S, zb-h1 at most K and also the output gradients its W needs,\n"
    "interleaved as its order of virtual stages decides, up to M: the table's\n"
    "stash column), working buffers for one micro-batch (kept with --recompute\n"
    "too, so that it saves stash only where two or more micro-batches are in\n"
    "flight), channel rings and the ops' workspace: a convolution's (on a GPU,\n"
    "all of --conv-workspace for each stage holding one) or a layernorm's\n"
    "(2 values a sample), whichever is larger; and each buffer's padding to a\n"
    "256-byte boundary in the device's one allocation (up to 255 bytes a\n"
    "tensor, which adds up on a stack of many small layers).\n"
    "\n"
    "With --profile FILE (written by 'brigade profile') layer times are this\n"
    "machine's measured ones instead, at the micro-batch size (between the\n"
    "sizes the profile timed, or in proportion to its one), and activations\n"
    "cross at the measured copy bandwidth (two copies per send).\n"
    "\n"
    "plan:\n"
    "  --batch B          samples per optimizer step (default 64)\n"
    "  --optimizer NAME   adam (default) or sgd\n"
    "  --momentum X       sgd momentum (default 0; > 0 keeps a velocity buffer)\n"
    "  --json             print the plan as JSON; each stage has the keys of\n"
    "                     'brigade train --metrics' stages (layers, device,\n"
    "                     peak_bytes, peak_by_category, ...) plus\n"
    "                     capacity_bytes and predicted_ms\n"
    "\n%s%s%s"
    "  (with plan, leaving out --split lets the planner choose)\n"
    "\n"
    "When nothing fits, plan prints its best attempt, names the stage that\n"
    "overflows and by how many bytes, and tries each change that saves memory:\n"
    "leaving out --split, --recompute, sgd (or --momentum 0), 1f1b for gpipe\n"
    "or zb-h1, a smaller --conv-workspace on GPUs, other micro-batch counts, and\n"
    "other device counts (more, and fewer where each then gets more memory or\n"
    "holds fewer micro-batches in flight); then the fewest of them together.\n"
    "It lists those that fit, and a faster way where one fits (a micro-batch\n"
    "count alone, or two changes together), and exits 2.\n"
    "\n"
    "examples:\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2\n"
    "  brigade plan examples/fashion_cnn.model --stages 4 --schedule gpipe \\\n"
    "      --microbatches 8\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2 --device-mem 20M\n"
    "      (does not fit; says which stage overflows and that --microbatches 2 fits)\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2 --split 4 --json\n"
    "  brigade plan examples/fashion_cnn.model --devices cpu:2 --microbatches auto\n"
    "  brigade plan examples/fashion_cnn.model \\\n"
    "      --topology tests/fixtures/two-socket-8-gpu.xml --devices auto --stages 4\n"
    "      (an 8-GPU server described by hwloc XML, run from the repository; the\n"
    "      four stages stay behind one socket's PCIe switches)\n";

typedef struct plan_options {
    const char *model;
    bg_placement_t placement;
    int64_t batch;
    bg_optimizer_config_t optimizer;
    int json;
} plan_options_t;

static bg_status_t parse_args(int argc, char **argv, plan_options_t *o, int *show_help) {
    static const char *const own[] = {"--batch", "--optimizer", "--momentum"};
    bg_placement_init(&o->placement);
    o->batch = 64;
    for (int i = 1; i < argc && !*show_help; i++) {
        int taken;
        BG_CHECK(bg_cli_shared_arg(argc, argv, &i, &o->model, &o->placement, show_help, &taken));
        if (taken) continue;
        const char *arg = argv[i], *v;
        if (strcmp(arg, "--json") == 0) {
            BG_CHECK(bg_cli_flag(argv, i));
            o->json = 1;
            continue;
        }
        int known = 0;
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) known |= !strcmp(arg, own[k]);
        if (!known) return bg_cli_unknown_option(arg, own, sizeof own / sizeof own[0], 1, "--json");
        BG_CHECK(bg_cli_option_value(argc, argv, &i, &v));
        if (strcmp(arg, "--batch") == 0)
            BG_CHECK(bg_cli_parse_int(arg, v, 1, 1 << 20, &o->batch));
        else if (strcmp(arg, "--optimizer") == 0)
            BG_CHECK(bg_cli_parse_optimizer(arg, v, &o->optimizer.kind));
        else
            BG_CHECK(bg_cli_parse_double(arg, v, 0, 1, &o->optimizer.sgd.momentum));
    }
    if (*show_help) return BG_OK;
    if (o->model == NULL) return bg_error_set(BG_ERR_INVALID, "no MODEL given");
    return bg_cli_check_optimizer(&o->optimizer, argc, argv);
}

int bg_cmd_plan(int argc, char **argv) {
    plan_options_t o = {.optimizer = BG_OPTIMIZER_CONFIG_INIT};
    int show_help = 0;
    bg_status_t st = parse_args(argc, argv, &o, &show_help);
    if (show_help) {
        printf(help, bg_placement_help, bg_placement_help_schedule, bg_placement_help_rest);
        return 0;
    }
    if (st != BG_OK) return bg_cli_usage_error("plan", "%s", bg_error_message());
    bg_cli_setup_t setup = {0};
    bg_plan_t *p = NULL;
    int code = 0;
    BG_CHECK_GOTO(
        bg_cli_plan_open("plan", o.model, &o.placement, o.batch, &o.optimizer, &setup, &p), st,
        fail);
    bg_cli_note_turns(p, &o.placement, o.batch);
    /* Where the figures come from, as simulate says it. */
    const char *costs = setup.profile != NULL ? o.placement.profile_path : NULL;
    if (o.json) {
        cJSON *root = bg_cli_plan_json(p, o.model);
        if (root != NULL && costs != NULL) cJSON_AddStringToObject(root, "profile", costs);
        if (root != NULL && costs == NULL) cJSON_AddNullToObject(root, "profile");
        if (root != NULL && o.placement.reversed &&
            cJSON_AddTrueToObject(root, "devices_reversed") == NULL) {
            cJSON_Delete(root);
            root = NULL;
        }
        if (root != NULL && !bg_cli_links_json(&o.placement, root)) {
            cJSON_Delete(root);
            root = NULL;
        }
        /* A plan that does not fit: what would, for a program to choose. */
        if (root != NULL && !p->partition->fits) {
            cJSON *found = cJSON_AddArrayToObject(root, "suggestions");
            if (found == NULL) {
                cJSON_Delete(root);
                root = NULL;
            } else {
                bg_cli_plan_explain_overflow("plan", p, &o.placement, 1, found, root);
            }
        }
        char *text = root != NULL ? bg_cli_json_print(root) : NULL;
        cJSON_Delete(root);
        if (text == NULL) {
            st = bg_error_set(BG_ERR_NOMEM, "out of memory writing JSON");
            goto fail;
        }
        puts(text);
        free(text);
    } else {
        char source[384];
        char shown[BG_CLI_SHOWN_MAX];
        printf("plan for %s: ", bg_cli_shown(o.model, shown, sizeof shown));
        bg_placement_describe(&o.placement, 0, stdout);
        printf("\n");
        bg_placement_describe_links(&o.placement, stdout);
        char sizes[64];
        printf("batch %lld (%s), %s; %s; costs from %s\n\n", (long long)o.batch,
               bg_cli_microbatch_sizes(o.batch, p->request.microbatches, sizes, sizeof sizes),
               bg_optimizer_kind_name(o.optimizer.kind),
               bg_cli_plan_split_source(p, source, sizeof source),
               costs != NULL ? bg_cli_shown(costs, shown, sizeof shown)
                             : "the analytic cost model");
        bg_cli_plan_print_table(p, stdout);
    }
    if (!p->partition->fits) {
        if (!o.json) bg_cli_plan_explain_overflow("plan", p, &o.placement, 1, NULL, NULL);
        code = 2;
    }
    goto done;
fail:
    code = bg_cli_fail("plan", st);
done:
    bg_plan_destroy(p);
    bg_cli_setup_close(&setup);
    return code;
}
