#!/bin/bash
# The sliding-window bands predicted before any device call: the simulator with the committed
# calibration and tables, one H200, the windowed models of models/extra under adamw and dmuon at
# 4096 and 8192 tokens, whole, causal with the model's window (the band), and causal with the
# window taken out of a copy of the model (the triangle). Run from the repository root.
e=models/extra
MODELS="$e/gemma-3-1b-pt.json $e/phi-3-mini-4k-instruct.json $e/mistral-7b-v0.1-12l.json $e/gpt-oss-20b-2l.json" \
    STRATEGIES="adamw dmuon" TOKENS="4096 8192" ATTENTIONS="whole causal causal-nowin" exec tools/predict_cases.sh
