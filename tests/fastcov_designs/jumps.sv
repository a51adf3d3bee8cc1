// break/continue (Icarus 11 parses neither): the fast path makes them `disable` of named blocks.
module jumps (input clk, input [7:0] a, output reg [3:0] ones, output reg [3:0] lead, output reg [3:0] odd);
  integer i;
  always @(posedge clk) begin
    ones = 0;
    for (i = 0; i < 8; i = i + 1) begin
      if (!a[i]) continue;
      if (i == 7) break;
      ones = ones + 1;
    end
  end
  always @(posedge clk) begin : scan
    int k;
    k = 7;
    lead = 0;
    while (k >= 0) begin
      if (a[k]) break;
      lead = lead + 1;
      k = k - 1;
    end
  end
  always @(negedge clk) begin : count
    int m;
    m = 0;
    odd = 0;
    repeat (4) begin
      m = m + 1;
      if (a[m] == a[m - 1]) continue;
      odd = odd + 1;
    end
    do begin
      m = m + 1;
      if (m == 6) continue;
      if (a[m]) odd = odd ^ 4'h8;
    end while (m < 7);
  end
endmodule
