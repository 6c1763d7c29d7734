"""The sim's τ²-bench rules on the inputs the cross-check with τ²-bench's own evaluator needs: call
directives whose JSON holds lists (retail's item_ids), and τ²-bench's own NL-judge prompt, whose
expected outcomes are a Python list repr."""

from __future__ import annotations

import json

from orchestra_ops.services.simllm import tau2_rules

EXCHANGE = {"order_id": "#W2378156", "item_ids": ["1151293680", "4983901480"], "new_item_ids": ["7706410293"],
            "payment_method_id": "credit_card_9513926"}
SCENARIO = (f'Exchange it. [sim:call find_user_id_by_name_zip {{"first_name": "Yusuf", "zip": "19122"}}] '
            f"[sim:say 1093.34] [sim:call exchange_delivered_order_items {json.dumps(EXCHANGE)}] "
            f'[sim:user_call toggle_data {{"on": [true]}}] [sim:agent=parallel]')


def test_call_directives_read_json_objects_with_lists_in_order() -> None:
    calls = tau2_rules.call_directives(SCENARIO)
    assert [(name, json.loads(args)) for name, args, _, _ in calls] == [
        ("find_user_id_by_name_zip", {"first_name": "Yusuf", "zip": "19122"}),
        ("exchange_delivered_order_items", EXCHANGE)]
    assert [(n, json.loads(a)) for n, a, _, _ in tau2_rules.call_directives(SCENARIO, "user_call")] == [
        ("toggle_data", {"on": [True]})]
    assert tau2_rules.agent_plan(SCENARIO, 0)[1] == {"name": "exchange_delivered_order_items",
                                                     "arguments": json.dumps(EXCHANGE)}


def test_the_user_passes_every_agent_directive_on_in_the_order_written() -> None:
    body = {"messages": [{"role": "system", "content": f"<scenario>{SCENARIO}</scenario>"},
                         {"role": "user", "content": "Hi! How can I help you today?"},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"id": "u0", "type": "function",
                                          "function": {"name": "toggle_data", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "u0", "content": "ok"}]}
    reply = tau2_rules.user_reply(body)
    assert reply.content == (tau2_rules.FIRST_TEXT + '[sim:call find_user_id_by_name_zip {"first_name": "Yusuf", '
                             f'"zip": "19122"}}] [sim:say 1093.34] [sim:call exchange_delivered_order_items '
                             f"{json.dumps(EXCHANGE)}] [sim:agent=parallel]")


def test_the_judge_reads_the_python_list_of_tau2_benchs_own_prompt() -> None:
    outcomes = ["Agent says the refund is '1093.34'.", "Agent mentions the 'gift card' balance.", 'Agent is polite.']
    prompt = ("\n        conversation:\n        assistant: Hi! How can I help you today?\nuser: Hi\n"
              "assistant: Your refund is 1093.34.\ntool: gift card\n        \n        expectedOutcomes:\n"
              f"        {outcomes}\n        ")
    body = {"messages": [{"role": "system", "content": 'Answer with "metExpectation" per outcome.'},
                         {"role": "user", "content": prompt}]}
    assert tau2_rules.classify(body, [m["content"] for m in body["messages"]]) == tau2_rules.TAU2_JUDGE
    verdicts = json.loads(tau2_rules.judge_reply(body).content or "")["results"]
    assert [(v["expectedOutcome"], v["metExpectation"]) for v in verdicts] == [
        (outcomes[0], True), (outcomes[1], False), (outcomes[2], True)]
