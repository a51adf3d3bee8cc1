// else-if chains with and without a final else, `else begin if`, nested ifs, case / casez /
// casex with and without default, unique case, ?: nesting (Icarus 11 has no `case inside`).
module branches (input clk, input rst, input [3:0] a, input [3:0] b, output reg [3:0] q,
                 output [3:0] y, output reg [1:0] kind);
  reg [3:0] q2;
  reg [1:0] kind2;
  wire [3:0] w = (a > b) ? a : (a == b ? 4'd0 : b);          // ?: in a net declaration
  assign y = a[0] ? (a[1] ? 4'd3 : 4'd2) : (b[0] ? 4'd1 : 4'd0);  // nested ?: (continuous)
  always @(posedge clk) begin
    if (rst) q <= 0;                                          // chain with a final else
    else if (a == 4'd1) q <= 1;
    else if (a == 4'd2) q <= 2;
    else q <= w;
    if (a == 4'd3) kind <= 1;                                 // chain without a final else
    else if (a == 4'd4) kind <= 2;
    if (b == 4'd5) kind <= 3;                                 // `else begin if` is no chain
    else begin if (b == 4'd6) kind <= 0; end
    if (a[3]) begin                                           // nested, no else
      if (b[3]) q <= ~q;
    end
  end
  always @(posedge clk) begin
    case (a)
      4'd0: q2 <= q2;
      4'd1, 4'd2: begin q2 <= b; end
      default: ;
    endcase
    casez (b)
      4'b1???: kind2 <= 2'd1;
      4'b01??: kind2 <= 2'd2;
    endcase
    casex (a)
      4'b00x1: kind2 <= a[1] ? 2'd3 : 2'd0;                    // ?: in a procedural assignment
      default kind2 <= kind2;
    endcase
    unique case (b[1:0])
      2'd0: q2 <= 4'd8;
      2'd1: q2 <= 4'd9;
      2'd2, 2'd3: q2 <= 4'd10;
    endcase
  end
endmodule
