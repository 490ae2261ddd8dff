/* Where a model may be cut into stages (model_spec.h): a stage may not
 * start inside a residual block, whose add needs the block's input on the
 * same stage. */
#include <stdio.h>

#include "model_spec.h"
#include "status.h"

bg_status_t bg_model_spec_check_split(const bg_model_spec_t *spec, int stages, const int *split,
                                      int *first) {
    int previous = 0;
    for (int s = 1; s < stages; s++) {
        const int start = split[s - 1];
        if (start <= previous || start >= spec->num_layers)
            return bg_error_set(BG_ERR_INVALID,
                                "--split: stage %d would start at layer %d; boundaries must "
                                "increase and lie within 1..%d",
                                s, start, spec->num_layers - 1);
        const int block = bg_model_spec_block_cut(spec, start);
        if (block >= 0) {
            const bg_layer_spec_t *r = &spec->layers[block];
            const int add = r->partner;
            /* Where the stage could start instead: at the block, unless that
             * is no later than the stage before starts, or after the add,
             * unless the block ends the model. */
            const int before = block > previous, after = add + 1 < spec->num_layers;
            char instead[96];
            if (before && after)
                snprintf(instead, sizeof instead, "start it at layer %d or %d", block, add + 1);
            else if (before || after)
                snprintf(instead, sizeof instead, "start it at layer %d", before ? block : add + 1);
            else
                snprintf(instead, sizeof instead, "no stage %d can start near it", s);
            return bg_error_set(BG_ERR_INVALID,
                                "--split: stage %d would start at layer %d, inside the residual "
                                "block of layers %d..%d (lines %d..%d), whose add needs the "
                                "block's input on the same stage; %s",
                                s, start, block, add, r->line, spec->layers[add].line, instead);
        }
        previous = start;
    }
    if (first != NULL) {
        first[0] = 0;
        for (int s = 1; s < stages; s++) first[s] = split[s - 1];
        first[stages] = spec->num_layers;
    }
    return BG_OK;
}

int bg_model_spec_stage_places(const bg_model_spec_t *spec) {
    int places = 0;
    for (int l = 0; l < spec->num_layers; l++) places += bg_model_spec_can_start(spec, l);
    return places;
}

bg_status_t bg_model_spec_check_stage_count(const bg_model_spec_t *spec, int stages,
                                            const char *why) {
    const int n = spec->num_layers;
    if (stages > n)
        return bg_error_set(BG_ERR_INVALID, "%d stages%s but the model has only %d layer%s", stages,
                            why, n, n == 1 ? "" : "s");
    const int places = bg_model_spec_stage_places(spec);
    if (stages <= places) return BG_OK;
    /* The places, the first few of them. */
    char list[160] = "";
    size_t used = 0;
    for (int l = 0, k = 0; l < n && used < sizeof list; l++) {
        if (!bg_model_spec_can_start(spec, l)) continue;
        const char *sep = k == 0 ? "" : k + 1 == places ? " and " : ", ";
        if (++k > 8) {
            snprintf(list + used, sizeof list - used, ", ...");
            break;
        }
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", sep, l);
    }
    return bg_error_set(BG_ERR_INVALID,
                        "%d stages%s but the model has only %d place%s to start one, layer%s "
                        "%s: a stage may not start inside a residual block",
                        stages, why, places, places == 1 ? "" : "s", places == 1 ? "" : "s", list);
}

int bg_model_spec_block_cut(const bg_model_spec_t *spec, int layer) {
    if (layer <= 0 || layer >= spec->num_layers || spec->layers[layer].open_blocks == 0) return -1;
    /* The outermost open block is the last residual before `layer` that
     * opened with none open. */
    for (int i = layer - 1; i >= 0; i--) {
        const bg_layer_spec_t *l = &spec->layers[i];
        if (l->kind == BG_LAYER_RESIDUAL && l->open_blocks == 0) return i;
    }
    return -1;
}
