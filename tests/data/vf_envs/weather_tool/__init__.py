"""weather-tool: answer with what a tool says (a local test taskset; a task-scoped toolset).

Each task asks for the weather in a city. The only way to know it is the ``get_weather`` tool
(`weather_tool.servers.weather.WeatherToolset`, advertised bare as ``get_weather``: its
``TOOL_PREFIX`` is None), which verifiers launches as an MCP server per rollout. Rewards:
``called_tool`` (a tool message carries the forecast of the task's city) and ``answered`` (the
final reply names the forecast's sky).
"""

from __future__ import annotations

import verifiers.v1 as vf

from weather_tool.servers.weather import FORECASTS, WeatherToolset


class WeatherTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class WeatherTaskData(vf.TaskData):
    city: str
    forecast: str


class WeatherTask(vf.Task[WeatherTaskData, vf.State, WeatherTaskConfig]):
    @classmethod
    def toolsets(cls, config: WeatherTaskConfig) -> list[vf.Toolset]:
        return [WeatherToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def called_tool(self, trace: vf.Trace) -> float:
        """The tool's answer for this task's city reached the conversation."""
        return float(any(self.data.forecast in str(m.content or "") for m in trace.tool_messages))

    @vf.reward(weight=1.0)
    async def answered(self, trace: vf.Trace) -> float:
        """The final reply names the sky of the forecast."""
        sky = self.data.forecast.split(",")[0].lower()
        return float(sky in trace.last_reply.lower())

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(sum(len(m.tool_calls or []) for m in trace.assistant_messages))


class WeatherConfig(vf.TasksetConfig):
    task: WeatherTaskConfig = WeatherTaskConfig()


class WeatherTaskset(vf.Taskset[WeatherTask, WeatherConfig]):
    def load(self) -> list[WeatherTask]:
        return [
            WeatherTask(
                WeatherTaskData(idx=i, prompt=f"What is the weather in {city}?", city=city, forecast=forecast),
                self.config.task,
            )
            for i, (city, forecast) in enumerate(FORECASTS.items())
        ]


__all__ = ["WeatherTaskset"]
