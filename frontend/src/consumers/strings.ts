// The catalogue keys of the consumers' health panel (issue 25 item 4),
// spread into en.ts and ko.ts.
export const consumersEn = {
  "consumers.title": "Background consumers",
  "consumers.intro": "Events a consumer of the log could not apply are parked here: the consumer skipped them and kept going. Each is also in the server's log at ERROR.",
  "consumers.none": "No event parked, no consumer stopped.",
  "consumers.parked_total": "{count} events parked since this server started (the newest 100 below).",
  "consumers.stopped": "Stopped: {name}",
  "consumers.not_applied": "could not apply it",
  "consumers.col.consumer": "Consumer",
  "consumers.col.event": "Event",
  "consumers.col.error": "Why",
  "consumers.col.at": "When",
} as const;

export const consumersKo: Record<keyof typeof consumersEn, string> = {
  "consumers.title": "백그라운드 소비자",
  "consumers.intro": "로그 소비자가 적용하지 못한 이벤트는 여기 보류됩니다. 소비자는 그 이벤트를 건너뛰고 계속 진행했습니다. 각 이벤트는 서버 로그에도 오류로 남습니다.",
  "consumers.none": "보류된 이벤트도, 멈춘 소비자도 없습니다.",
  "consumers.parked_total": "이 서버가 시작된 뒤 보류된 이벤트 {count}개 (아래는 최근 100개).",
  "consumers.stopped": "멈춤: {name}",
  "consumers.not_applied": "적용하지 못함",
  "consumers.col.consumer": "소비자",
  "consumers.col.event": "이벤트",
  "consumers.col.error": "이유",
  "consumers.col.at": "시각",
};
