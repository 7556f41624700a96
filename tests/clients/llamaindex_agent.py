"""LlamaIndex's ``FunctionAgent`` over ``OpenAILike``, written as LlamaIndex's docs write it, run in
its own environment (its pins clash with the other clients'): ``python llamaindex_agent.py URL
[stream|whole]`` prints the answer and the calls made as one JSON line."""

from __future__ import annotations

import asyncio
import json
import sys

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai_like import OpenAILike

CUSTOMERS = {"cust-1001": {"name": "Ada Lovelace", "plan": "pro"}, "cust-1002": {"name": "Alan Turing", "plan": "free"}}
calls: list[str] = []


def get_customer(customer_id: str) -> str:
    """Look up a customer record by id, e.g. cust-1001."""
    calls.append(customer_id)
    return json.dumps(CUSTOMERS.get(customer_id, {"error": "no such customer"}))


def get_weather(city: str) -> str:
    """Current weather in a city."""
    calls.append(city)
    return json.dumps({"city": city, "sky": "clear"})


async def main(url: str, streaming: bool) -> None:
    llm = OpenAILike(model="qwen2.5-coder-0.5b", api_base=url, api_key="none", is_chat_model=True,
                     is_function_calling_model=True, context_window=8192, timeout=300)
    agent = FunctionAgent(tools=[get_customer, get_weather], llm=llm, streaming=streaming)
    answer = await agent.run("What subscription plan is customer cust-1001 using?")
    print(json.dumps({"answer": str(answer), "calls": calls}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:] != ["whole"]))
