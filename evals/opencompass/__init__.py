"""gsm8k and mmlu as OpenCompass runs them, over the fleet, several models side by side.

    extract.py   OpenCompass's answer extraction and comparison (gsm8k, mmlu zero-shot and 5-shot)
    paired.py    accuracies and the paired 95 % interval of a difference between two models
    outputs.py   predictions/, results/ and summary/summary.csv in OpenCompass's shapes
    suite.py     the shared suite: one unit per sample x model, scores, the side-by-side table
    gsm8k.py     the gsm8k suite (4-shot chat turns, like gsm8k_gen_1d7fe4)
    mmlu_data.py MMLU's file layout (test/<subject>_test.csv, dev/) and its subject groups
    mmlu.py      the mmlu suite (zero-shot ANSWER: LETTER, like mmlu_openai_simple_evals_gen_b618ea;
                 --variant 5shot like mmlu_gen_4d595a)
"""
