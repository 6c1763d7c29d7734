"""gsm8k, mmlu, humaneval, bbh, hellaswag, ARC and cmmlu as OpenCompass runs them, over the fleet, several
models side by side.

    extract.py   OpenCompass's answer extraction and comparison (gsm8k, mmlu zero-shot and 5-shot)
    paired.py    accuracies and the paired 95 % interval of a difference between two models
    outputs.py   predictions/, results/ and summary/summary.csv in OpenCompass's shapes
    suite.py     the shared suite: one unit per sample x model, scores, the side-by-side table
    gsm8k.py     the gsm8k suite (4-shot chat turns, like gsm8k_gen_1d7fe4)
    mmlu_data.py MMLU's file layout (test/<subject>_test.csv, dev/) and its subject groups
    mmlu.py      the mmlu suite (zero-shot ANSWER: LETTER, like mmlu_openai_simple_evals_gen_b618ea;
                 --variant 5shot like mmlu_gen_4d595a)
    postprocess.py the postprocessors of the five below (first_option, bbh mcq/free-form, cmmlu, humaneval v2)
    humaneval.py the humaneval suite (humaneval_gen -> dcae0e; every completion runs in our sandbox; pass@1)
    bbh.py       the bbh suite (bbh_gen -> ee62e9: 27 subsets, CoT few-shot, `score`, the `bbh` average)
    hellaswag.py the hellaswag suite (hellaswag_gen -> 10shot e42710)
    arc.py       the arc suite (ARC_c_gen and ARC_e_gen -> 1e0de5)
    cmmlu.py     the cmmlu suite (cmmlu_gen -> 0shot_cot 305931), cmmlu_data.py its subjects and groups
    multi.py     the `opencompass` suite: several of the above in one run (what `ops posttrain` runs)
    templates/   the prompts of each; data/ the bundled synthetic sets in OpenCompass's file layouts
"""
