"""Questions whose one call fails: does the answer say so, or make one up?

Twelve questions (an unknown customer, order and stock ticker, each asked in English, Chinese,
Japanese and Spanish) with the seeds' scenario tools (the needed one beside unrelated ones); the
needed call returns the tool's own error record (``{"error": "order Z-404 not found"}``), any
other call an error too. Each runs through ``Agent`` under the model's default decisions, once
with the family's ``error_hint`` and once without it (the ``result_hint`` after errors too, as
before the error hint existed). Prints each answer and, per setting: the needed call made once
and nothing else called, and the answers that say the call failed, read by words that say so in
the four languages (a rough reading: the answers are printed to be read).

    .venv/bin/python benchmarks/failing_calls.py --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import dataclasses

import localtools
from localtools.bench._scenarios import CUSTOMER, EMAIL, ORDER, STOCK, TEMPERATURE, WEATHER, Scenario, run_scenario

QUESTIONS = {
    "customer": {"en": "What subscription plan is customer cust-9999 using?", "zh": "客户 cust-9999 用的是哪个订阅套餐？",
                 "ja": "顧客 cust-9999 はどのサブスクリプションプランを使っていますか？",
                 "es": "¿Qué plan de suscripción usa el cliente cust-9999?"},
    "order": {"en": "Has order Z-404 shipped yet?", "zh": "订单 Z-404 发货了吗？", "ja": "注文 Z-404 はもう発送されましたか？",
              "es": "¿Ya se envió el pedido Z-404?"},
    "stock": {"en": "What is the current price of ZZQX stock?", "zh": "ZZQX 股票现在的价格是多少？",
              "ja": "ZZQX の株価は今いくらですか？", "es": "¿Cuál es el precio actual de la acción ZZQX?"},
}
#: Words that say a lookup failed, in the four languages (answers in any of them are read with all).
FAILED_WORDS = ("not found", "no customer", "unknown", "does not exist", "doesn't exist", "invalid", "error",
                "not recognized", "could not", "couldn't", "unable", "不存在", "找不到", "未找到", "没有找到", "未知",
                "错误", "无法", "見つかり", "存在しません", "存在し", "不明", "エラー", "no se encontr", "no existe",
                "desconocid")


def scenarios() -> list[Scenario]:
    out = []
    for language in ("en", "zh", "ja", "es"):
        out += [
            Scenario(f"customer-missing-{language}", QUESTIONS["customer"][language], (CUSTOMER, TEMPERATURE),
                     ("get_customer", {"customer_id": "cust-9999"}), {"error": "no customer with id cust-9999"},
                     ("cust-9999",), language),
            Scenario(f"order-missing-{language}", QUESTIONS["order"][language], (ORDER, CUSTOMER, EMAIL),
                     ("get_order", {"order_id": "Z-404"}), {"error": "order Z-404 not found"}, ("Z-404",), language),
            Scenario(f"stock-missing-{language}", QUESTIONS["stock"][language], (STOCK, WEATHER),
                     ("get_stock_price", {"symbol": "ZZQX"}), {"error": "unknown symbol ZZQX"}, ("ZZQX",), language),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()
    model = localtools.load(args.model)
    family = model.family
    if not family.error_hint:
        parser.error(f"the {family.name!r} family has no error_hint to compare")
    rows = []
    for label, hint in (("error hint", family.error_hint), ("result hint after errors", "")):
        model.family = dataclasses.replace(family, error_hint=hint)
        once = said = 0
        for scenario in scenarios():
            result = run_scenario(model, label, scenario)
            says = any(word in result.answer.lower() for word in FAILED_WORDS)
            once += result.called_once
            said += says and result.called_once
            print(f"{label:>24} | {scenario.name:<20} | calls {len(result.calls)} | {'says it failed' if says else '-':<14} | "
                  f"{result.answer[:110]!r}", flush=True)
        rows.append((label, once, said, len(scenarios())))
    print()
    print("| after a failed call | the one call, nothing else | and the answer says it failed |")
    print("|---|---|---|")
    for label, once, said, n in rows:
        print(f"| {label} | {once}/{n} | {said}/{n} |")


if __name__ == "__main__":
    main()
